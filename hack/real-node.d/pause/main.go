// The pause program of the real nodes' pod sandboxes (hack/real-node): it holds the
// sandbox's namespaces and waits for SIGTERM or SIGINT. Built statically on the machine,
// because no registry is reachable from the test world.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
}
