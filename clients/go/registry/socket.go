package registry

import "os"

const (
	// SocketEnvironmentVariable names the environment variable that gives the daemon's socket when
	// Dial is given no path (the convention registryctl follows too).
	SocketEnvironmentVariable = "REGISTRYD_SOCKET"
	// DefaultSocketPath is where a daemon started from the repository (tools/registryd, with
	// config/registryd.json) listens, relative to the working directory.
	DefaultSocketPath = "./run/registryd.sock"
	// SystemSocketPath is the socket of the installed system service (systemd/registryd.socket).
	SystemSocketPath = "/run/registryd/registryd.sock"
)

// SocketPath resolves the socket Dial connects to, as registryctl does: path when it is not empty,
// else $REGISTRYD_SOCKET when set and not empty, else DefaultSocketPath; except that when
// DefaultSocketPath does not exist and SystemSocketPath does, the system service's socket.
func SocketPath(path string) string {
	if path != "" {
		return path
	}
	if env := os.Getenv(SocketEnvironmentVariable); env != "" {
		return env
	}
	if !exists(DefaultSocketPath) && exists(SystemSocketPath) {
		return SystemSocketPath
	}
	return DefaultSocketPath
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
