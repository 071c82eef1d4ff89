from alphac.commands import main

main()
