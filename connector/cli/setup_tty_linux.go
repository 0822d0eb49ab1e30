package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/sys/unix"
)

// readSecretLine reads one line from the terminal f with echo turned off,
// and turns it back on however the read ends. Ctrl-C restores the terminal
// and ends setup with status 130.
func readSecretLine(f *os.File, in *bufio.Reader) (line string, err error) {
	fd := int(f.Fd())
	saved, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return readLine(in)
	}
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return readLine(in)
	}
	defer func() {
		if rerr := unix.IoctlSetTermios(fd, unix.TCSETS, saved); rerr != nil && err == nil {
			err = fmt.Errorf("turn terminal echo back on: %w", rerr)
		}
	}()

	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	defer signal.Stop(interrupt)
	type answer struct {
		s   string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := readLine(in)
		done <- answer{s, err}
	}()
	select {
	case a := <-done:
		return a.s, a.err
	case <-interrupt:
		return "", errSetupInterrupted
	}
}

func readLine(in *bufio.Reader) (string, error) {
	s, err := in.ReadString('\n')
	if err != nil && s == "" {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}
