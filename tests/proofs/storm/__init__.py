"""The restart storm (storm): a restart a second of three services under every kind of load at
once; chains (the services' generations), loads, reference (HAProxy's and nginx's reloads)
and report (verdicts and tables)."""
