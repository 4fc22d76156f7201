from privtext.cli import main

main()
