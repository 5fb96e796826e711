"""The seeds' own code (../shared/seeds), copied verbatim into files the fidelity tests serve."""
