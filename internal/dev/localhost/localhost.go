// Package localhost is what the tests and the local tools (make dev, make
// chaos) ask of the machine they run on: free loopback ports, and the
// folder of the module they run in. It ships in no Lambda.
package localhost

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// FreePorts asks the kernel for n different free loopback ports. It holds
// each until it has them all: a port let go at once may be the kernel's
// next answer too, and two servers told the same port collide. A port is
// free when FreePorts returns; a server that binds it later may still find
// it taken by another process, and should say so. It returns the error of
// a listen that failed.
func FreePorts(ctx context.Context, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ModuleRoot is the folder of the go.mod above the working directory (the
// repository's root, where .ci and the Makefile are). Errors: no go.mod up
// to the file system's root.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("find module root: no go.mod above %s", wd)
		}
	}
}
