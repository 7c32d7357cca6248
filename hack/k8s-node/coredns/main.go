// A CoreDNS with only the plugins the test cluster's DNS needs: it answers names of the cluster's
// Services and pods and nothing else. Leaving out "forward" (and every other plugin that talks to
// the outside) makes it impossible for a Corefile to send a query beyond the cluster.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which a query passes the plugins, as in CoreDNS's own plugin.cfg.
var directives = []string{"errors", "log", "health", "ready", "kubernetes", "cache"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
