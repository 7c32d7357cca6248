// The pod sandbox ("pause") process of the real one-node test cluster: it holds the pod's namespaces
// open, reaps the zombies of a shared process namespace and exits on SIGINT or SIGTERM, as Kubernetes'
// own build/pause does. Built statically into the image scripts/k8s-cluster.sh gives containerd.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
