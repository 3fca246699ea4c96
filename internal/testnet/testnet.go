// Package testnet lists this machine's own addresses for tests that check
// a listener is reachable on loopback only.
package testnet

import (
	"net"
	"time"
)

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

// DialOffLoopback dials port on every NonLoopbackIPs address and returns
// how many it tried and those that accepted the connection.
func DialOffLoopback(port string, timeout time.Duration) (tried int, accepted []string, err error) {
	ips, err := NonLoopbackIPs()
	if err != nil {
		return 0, nil, err
	}
	for _, ip := range ips {
		target := net.JoinHostPort(ip.String(), port)
		if conn, err := net.DialTimeout("tcp", target, timeout); err == nil {
			conn.Close()
			accepted = append(accepted, target)
		}
	}
	return len(ips), accepted, nil
}
