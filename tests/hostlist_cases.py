"""One table of Slurm hostlist cases for both parsers: the executables' (C,
alphac/runtime/hostlist.c, tests/runtime/test_rt_hostlist.py) and the emitters' (Python,
alphac/launch/hostlist.py, tests/unit/test_hostlist.py).

EXPANDS: what `scontrol show hostnames LIST` prints for each (tests/unit/test_hostlist.py asks
Slurm itself when it is installed). REFUSED: the one-line message of each bad list, the
same from both parsers; Slurm refuses these too, except the ones marked `tolerated`, which
it reads in some way of its own (an empty entry skipped, a blank as a separator, `n[1-]` as
n1, `n]` as a name) and which no Slurm variable holds.
"""

EXPANDS = [
    ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
    ("n[01-10]", ["n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"]),
    ("a[1-2],b3", ["a1", "a2", "b3"]),
    ("rack[1-2]-node[1-2]", ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]),
    ("node[1-2,4]-ib[1-2]", ["node1-ib1", "node1-ib2", "node2-ib1", "node2-ib2", "node4-ib1",
                             "node4-ib2"]),
    ("n[1-2][3-4]", ["n13", "n14", "n23", "n24"]),
    ("n[1]2[3]", ["n123"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[01-3]", ["n01", "n02", "n03"]),
    ("n[1-03]", ["n1", "n2", "n3"]),
    ("n[1-010]", ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"]),
    ("n[007]", ["n007"]),
    ("n[0-0]", ["n0"]),
    ("n1[0-1]", ["n10", "n11"]),
    ("[1-2]", ["1", "2"]),
    ("n[99999999999-100000000000]", ["n99999999999", "n100000000000"]),
    ("a,a", ["a", "a"]),
    ("n[1,1]", ["n1", "n1"]),
    ("n[1-2],n[2-3]", ["n1", "n2", "n2", "n3"]),
    ("h-1,h-2", ["h-1", "h-2"]),
    ("n_a[1-2]", ["n_a1", "n_a2"]),
    ("10.0.0.[1-3]", ["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    ("localhost", ["localhost"]),
    ("h" * 255, ["h" * 255]),
]

REFUSED = [
    ("", "empty host list"),
    ("a,,b", "empty entry at character 3"),  # tolerated
    (",a", "empty entry at character 1"),  # tolerated
    ("a,", "empty entry at character 3"),  # tolerated
    ("n[3-1]", "range '3-1' at character 3 runs backwards"),
    ("n[1-2", "unclosed '[' at character 2"),  # tolerated
    ("a[1],n[1-2,b3", "unclosed '[' at character 7"),
    ("n]", "unexpected ']' at character 2"),  # tolerated
    ("n[1-2]]", "unexpected ']' at character 7"),
    ("a[[1]]", "'[' inside brackets at character 3"),
    ("n[]", "bad range '' at character 3: expected N or N-M"),
    ("n[a-b]", "bad range 'a-b' at character 3: expected N or N-M"),
    ("n[1--2]", "bad range '1--2' at character 3: expected N or N-M"),
    ("n[-2]", "bad range '-2' at character 3: expected N or N-M"),
    ("n[1-]", "bad range '1-' at character 3: expected N or N-M"),  # tolerated
    ("n[,1]", "bad range '' at character 3: expected N or N-M"),
    ("n[1,]", "bad range '' at character 5: expected N or N-M"),
    ("n[1-2,x]", "bad range 'x' at character 7: expected N or N-M"),
    ("x[1-2,5-6]y,z", "text after the last ']' at character 11"),
    ("a[1-2]b[3]c", "text after the last ']' at character 11"),
    ("c[1-3].x", "text after the last ']' at character 7"),
    ("a b", "character ' ' at character 2 is not allowed in a host name"),  # tolerated
    ("a/b", "character '/' at character 2 is not allowed in a host name"),
    ("n[1234567890123456789]", "number in range '1234567890123456789' at character 3 has more "
                               "than 18 digits"),
    ("n[1-1000000]", "expands to more than 65536 hosts"),
    ("n[0-65535],m", "expands to more than 65536 hosts"),
    ("n[1-300][1-300]", "expands to more than 65536 hosts"),
    ("h" * 256, "entry at character 1 expands to a host name longer than 255 characters"),
    ("a," + "h" * 250 + "[1-100000]", "entry at character 3 expands to a host name longer than "
                                      "255 characters"),
]
