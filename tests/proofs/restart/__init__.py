"""Restarts on one host, without a load balancer: socket_activation, handover, bad_inputs, and
run_all, which runs the three; common holds what they share (server generations, flags)."""
