package presence

// CloseConn closes c, a connection attached under name, with reason: the
// credential it was made with has ended (revoked, expired). If c still
// holds the name it is shown offline at once; either way it is closed in
// the background, like a connection that missed its heartbeats. It
// reports whether c was online under name.
func (r *Registry) CloseConn(name string, c Conn, reason string) bool {
	r.mu.Lock()
	e := r.entries[name]
	current := e != nil && e.conn == c
	online := current && e.online
	if online {
		e.online = false
	}
	r.mu.Unlock()
	if current {
		e.stop()
	}
	if online {
		r.changed(name, Offline)
	}
	go drop(c, reason)
	return online
}
