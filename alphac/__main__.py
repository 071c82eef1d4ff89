from alphac.cli import main

main()
