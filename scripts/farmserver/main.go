// Command farmserver runs a NATS server with JetStream on 127.0.0.1 (internal/farm/embedded)
// until SIGINT or SIGTERM: the server of scripts/perf/farm.sh and of trying the proving farm on
// one machine without a nats-server binary. For a farm of several hosts run nats-server itself
// (docs/SCALE-OUT.md).
//
//	go run ./scripts/farmserver -dir /tmp/farm-js -port 4222
//
// It prints the server's URL on stdout once the server takes connections.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/metalprove/metalprove/internal/farm/embedded"
)

func main() {
	dir := flag.String("dir", "", "directory of JetStream's files (required; kept, so that a restart finds the jobs)")
	port := flag.Int("port", 4222, "client port on 127.0.0.1 (0: a free port)")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: farmserver -dir DIR [-port N]")
		os.Exit(2)
	}
	srv, err := embedded.Start(*dir, *port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "farmserver:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	srv.Stop()
}
