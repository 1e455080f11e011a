"""The shipped hardware profiles (TOML data files), installed as perfmodel.hardware_profiles."""
