"""The pytest_ragcontract plugin, through pytest itself."""
