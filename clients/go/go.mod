// The Go client of registryd (see README.md).
//
// Offline build: the only dependency, the protobuf runtime, comes from Debian's
// golang-google-protobuf-dev (1.28.1, the release of Debian's protoc-gen-go that generated
// registrypb), through the replace below; no module proxy is ever needed (run-tests sets GOPROXY=off).
// With network access you may drop the replace and let the go command fetch v1.28.1 instead.
module registryd.local/client

go 1.19

require google.golang.org/protobuf v1.28.1

replace google.golang.org/protobuf => /usr/share/gocode/src/google.golang.org/protobuf
