"""Runtime adapters: paths, directory checks, locks, socket activation, sd_notify, config. Stdlib only."""
