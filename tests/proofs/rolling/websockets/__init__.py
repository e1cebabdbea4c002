"""The websockets proof (`python3 tests/proofs websockets`, see proof.py): WebSockets open at
SIGTERM get Close 1001 at their paced turn, silent clients are cut, bad input never crashes.

  proof       the command line, the runs and the tables at the end;
  drain       the drain scenario: clients of the websockets library and silent raw clients;
  bad_input   the bad-input scenario: raw sockets that misbehave once each;
  library     the clients of Python's websockets library, and the checks of one of them;
  raw         raw clients speaking the protocol by hand (harness.ws_frames);
  server_run  one server run (its event loop's lateness, the server's exit and summary).
"""
