package handlers

import "net/http"

// BehindTheDoor is what Routes' front door hands on: the routes alone.
func BehindTheDoor(h http.Handler) http.Handler { return h.(*frontDoor).next }

// TheDoorAlone is Routes' front door with nothing behind it: what the door
// does not answer itself is answered 599. h is the door's for good.
func TheDoorAlone(h http.Handler) http.Handler {
	f := h.(*frontDoor)
	f.next = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(599) })
	return f
}

// BehindTheEdgeDoor is what EdgeRoutes' front door hands on: the routes
// alone (h built with no bound per client address).
func BehindTheEdgeDoor(h http.Handler) http.Handler { return h.(*edgeDoor).next }

// TheEdgeDoorAlone is EdgeRoutes' front door with nothing behind it: what
// the door does not answer itself is answered 599. h is the door's for
// good.
func TheEdgeDoorAlone(h http.Handler) http.Handler {
	e := h.(*edgeDoor)
	e.next = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(599) })
	return e
}
