"""The package version (pyproject.toml reads it from here).

It is the registryd release the client ships with (Sources/RegistryModel/Version.swift): client
packages take the daemon's version. The client works with any daemon that speaks protocol major
version 1, registryd 0.1.0 onwards (README.md, "Compatibility").
"""

__version__ = "0.3.0"
