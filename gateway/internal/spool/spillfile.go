package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
)

// The spill file: a header, then records one after the other, each its
// length, a checksum of its bytes, and its bytes. The header holds where
// the first record not yet written starts, rewritten after each record
// the writer wrote: a process opening the file goes on from there. A
// record cut short by a crash, or one whose checksum does not match, ends
// the file: it and what follows are cut off when the file is opened.
//
// A directory may hold several spill files, one per process using it
// (each locked by its process while it runs): a process opening the
// directory takes the first file nobody holds, whoever wrote it, since
// any process can write any record to the shared destination.

const (
	// magic starts every spill file (and names its format's version).
	magic = "UGSPOOL1"
	// headerSize is the magic and the offset of the first unread record.
	headerSize = int64(len(magic)) + 8
	// frameHeader is a record's length and checksum.
	frameHeader = 8
	// maxRecord bounds one record read back, so that a damaged length
	// cannot make the reader allocate gigabytes.
	maxRecord = 256 << 20
	// slots is how many spill files one directory may hold.
	slots = 16
)

// castagnoli checksums records.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameSize is what a record of n bytes takes in the file.
func frameSize(n int) int64 { return frameHeader + int64(n) }

// spillFile is an open, locked spill file.
type spillFile struct {
	f    *os.File
	path string
	// size is the file's length; readOff where its first unread record
	// starts; records how many records from there on.
	size, readOff int64
	records       int
}

// openSpill takes the first spill file in dir no other process holds,
// making dir (private) and the file if need be, and reads where it stands.
func openSpill(dir string) (*spillFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var lastErr error
	for i := range slots {
		path := filepath.Join(dir, fmt.Sprintf("spool-%d.log", i))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lastErr = err
			_ = f.Close() // another process's: only read through its lock
			continue
		}
		s := &spillFile{f: f, path: path}
		if err := s.load(); err != nil {
			_ = f.Close() // the error that matters is err
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("every spill file in %s is held by another process (%d): give each process a directory of its own: %w", dir, slots, lastErr)
}

// load reads the header (writing one into an empty file), counts the
// records after the offset, and cuts off a damaged tail.
func (s *spillFile) load() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	s.size = st.Size()
	if s.size < headerSize {
		return s.reset()
	}
	var h [headerSize]byte
	if _, err := s.f.ReadAt(h[:], 0); err != nil {
		return err
	}
	if string(h[:len(magic)]) != magic {
		return fmt.Errorf("not a spill file (it starts %q)", h[:len(magic)])
	}
	s.readOff = int64(binary.BigEndian.Uint64(h[len(magic):]))
	if s.readOff < headerSize || s.readOff > s.size {
		return fmt.Errorf("its header points at %d, outside the file's %d bytes", s.readOff, s.size)
	}
	off := s.readOff
	for off < s.size {
		n, err := s.frameAt(off, nil)
		if err != nil {
			// A record cut short, or damaged: the file ends before it.
			if err := s.f.Truncate(off); err != nil {
				return err
			}
			s.size = off
			break
		}
		off += n
		s.records++
	}
	if s.records == 0 {
		return s.reset()
	}
	return nil
}

// errDamaged is a record that does not read back as written.
var errDamaged = errors.New("a record is damaged")

// frameAt checks the record at off and returns its size in the file;
// with rec non-nil it also returns the record's bytes there.
func (s *spillFile) frameAt(off int64, rec *[]byte) (int64, error) {
	var fh [frameHeader]byte
	if _, err := s.f.ReadAt(fh[:], off); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint32(fh[:4]))
	if n > maxRecord || off+frameHeader+n > s.size {
		return 0, errDamaged
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off+frameHeader); err != nil {
		return 0, err
	}
	if crc32.Checksum(b, castagnoli) != binary.BigEndian.Uint32(fh[4:]) {
		return 0, errDamaged
	}
	if rec != nil {
		*rec = b
	}
	return frameHeader + n, nil
}

// used is how much of the file records take, read or not.
func (s *spillFile) used() int64 { return s.size - headerSize }

// pendingBytes is how much of the file the unread records take.
func (s *spillFile) pendingBytes() int64 { return s.size - s.readOff }

// append writes rec at the end of the file in one write; a write that
// fails is cut off again.
func (s *spillFile) append(rec []byte) error {
	buf := make([]byte, frameHeader+len(rec))
	binary.BigEndian.PutUint32(buf[:4], uint32(len(rec)))
	binary.BigEndian.PutUint32(buf[4:8], crc32.Checksum(rec, castagnoli))
	copy(buf[frameHeader:], rec)
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		_ = s.f.Truncate(s.size) // the write's error is the one to report
		return err
	}
	s.size += int64(len(buf))
	s.records++
	return nil
}

// head reads the first unread record.
func (s *spillFile) head() ([]byte, error) {
	var rec []byte
	if _, err := s.frameAt(s.readOff, &rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// consume marks the first unread record written: the header's offset
// moves past it, and a file with nothing left starts again empty.
func (s *spillFile) consume() error {
	n, err := s.frameAt(s.readOff, nil)
	if err != nil {
		return err
	}
	s.readOff += n
	s.records--
	if s.records == 0 {
		return s.reset()
	}
	return s.writeOffset()
}

// reset empties the file to its header.
func (s *spillFile) reset() error {
	s.records, s.readOff, s.size = 0, headerSize, headerSize
	if err := s.f.Truncate(0); err != nil {
		return err
	}
	var h [headerSize]byte
	copy(h[:], magic)
	binary.BigEndian.PutUint64(h[len(magic):], uint64(headerSize))
	_, err := s.f.WriteAt(h[:], 0)
	return err
}

// writeOffset rewrites the header's offset.
func (s *spillFile) writeOffset() error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.readOff))
	_, err := s.f.WriteAt(b[:], int64(len(magic)))
	return err
}

// sync makes what was written durable: on a clean stop, not per record.
func (s *spillFile) sync() error { return s.f.Sync() }

// close releases the file, removing it when nothing is left in it.
func (s *spillFile) close() error {
	if s.records == 0 {
		_ = os.Remove(s.path) // an empty file left behind is harmless
	}
	return s.f.Close()
}
