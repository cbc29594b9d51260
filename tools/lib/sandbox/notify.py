# A stand-in for systemd's notification socket: prints each datagram with its time.
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666)
t0 = time.monotonic()
while True:
    print(f"+{time.monotonic() - t0:5.1f}s " + s.recv(4096).decode().replace("\n", " "), flush=True)
