# Implementations under verification, not tests: nothing here is collected.
collect_ignore_glob = ["*.py"]
