from privtext.cli import main

if __name__ == "__main__":  # a spawned process (dpft.devices' workers) imports this module without running the CLI
    main()
