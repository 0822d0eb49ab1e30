//go:build !linux

package cli

import (
	"bufio"
	"os"
	"strings"
)

// readSecretLine reads one line. Turning echo off is implemented for Linux
// terminals only; elsewhere the key is read like any other answer.
func readSecretLine(_ *os.File, in *bufio.Reader) (string, error) {
	s, err := in.ReadString('\n')
	if err != nil && s == "" {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}
