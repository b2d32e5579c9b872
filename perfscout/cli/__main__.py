from perfscout.cli import main

main()
