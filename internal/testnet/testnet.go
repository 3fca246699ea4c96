// Package testnet lists this machine's own addresses for tests that check
// a listener is reachable on loopback only.
package testnet

import "net"

// NonLoopbackIPs are this machine's interface addresses that are neither
// loopback nor link-local: where a listener bound to loopback must refuse
// connections.
func NonLoopbackIPs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			out = append(out, ipn.IP)
		}
	}
	return out, nil
}
