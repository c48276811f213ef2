/* A fixture for the check_layers_fails test (included against the layer direction). */
