package handlers

import "net/http"

// BehindTheDoor is what Routes' front door hands on: the routes alone.
func BehindTheDoor(h http.Handler) http.Handler { return h.(*frontDoor).next }
