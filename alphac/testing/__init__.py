"""What tests and benchmarks use to drive the product and nothing in the product does:
a peer that speaks the frame wire format, builds cached per process, owner output files
written from Python, and reading an owner's refusal. It may import any stage; no stage
imports it (tests/unit/test_structure.py).

    frames    the frame wire format in Python, and connecting to a real owner (a test plays a peer)
    session   builds cached per process, and one executable per owner
    outputs   an owner's output file as an executable writes it; its refusal code
"""
