// Package embedded runs a NATS server with JetStream inside the process, listening on
// 127.0.0.1 only, its streams in files under a directory: the real server (the nats-server Go
// module) for the farm's tests and for scripts/perf/farm.sh (scripts/farmserver). The metalprove
// binary does not include it: a farm runs a nats-server of its own (docs/SCALE-OUT.md).
package embedded

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a running server.
type Server struct {
	srv *server.Server
	// Dir holds JetStream's files; Port is the client port on 127.0.0.1.
	Dir  string
	Port int
}

// ReadyTimeout bounds the wait for a starting server to take connections.
const ReadyTimeout = 30 * time.Second

// Start starts a server on 127.0.0.1:port (0: a free port) with JetStream's file storage in
// dir. A server started again on the same dir and port finds its streams, buckets and
// consumers as they were.
func Start(dir string, port int) (*Server, error) {
	if port == 0 {
		port = server.RANDOM_PORT
	} else { // a port in use: say so now (the server would only fail to listen, silently)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("nats server: %w", err)
		}
		l.Close()
	}
	opts := &server.Options{
		ServerName: "metalprove-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("nats server on 127.0.0.1:%d did not start within %s", port, ReadyTimeout)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return nil, fmt.Errorf("nats server: unexpected listen address %v", srv.Addr())
	}
	return &Server{srv: srv, Dir: dir, Port: addr.Port}, nil
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Stop shuts the server down and waits until it has.
func (s *Server) Stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Restart stops the server and starts a new one on the same port and directory.
func (s *Server) Restart() (*Server, error) {
	s.Stop()
	return Start(s.Dir, s.Port)
}
