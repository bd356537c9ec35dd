package webhook

import "syscall"

// Control is the client's dialer Control function, for the tests that call
// it with addresses no test could connect to.
func (cl *Client) Control(network, address string) error {
	return cl.control(network, address, syscall.RawConn(nil))
}
