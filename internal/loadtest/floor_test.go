package loadtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Both floors answer as a sold-out Flashline would, on keep-alive
// connections: the admin's create-sale call, /healthz, and a reservation's
// refusal with the same status, body and headers.
func TestFloorAnswersAsTheFrontDoor(t *testing.T) {
	for _, kind := range []string{"http", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := ln.Addr().String()
			require.NoError(t, ln.Close())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Floor(ctx, addr, kind) }()
			t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

			c := &http.Client{Transport: &http.Transport{}}
			var res *http.Response
			require.Eventually(t, func() bool {
				res, err = c.Get("http://" + addr + "/healthz")
				return err == nil
			}, 5e9, 1e7)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.Equal(t, 200, res.StatusCode)

			res, err = c.Post("http://"+addr+"/admin/sales", "application/json", strings.NewReader(`{"sku":"x"}`))
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			require.Equal(t, 201, res.StatusCode)
			require.JSONEq(t, `{"saleId":"`+FloorSale+`"}`, string(body))

			for range 3 { // one connection, several requests
				res, err = c.Post("http://"+addr+"/sales/"+FloorSale+"/reservations", "application/json", strings.NewReader(`{"quantity":1}`))
				require.NoError(t, err)
				body, _ = io.ReadAll(res.Body)
				res.Body.Close()
				require.Equal(t, 409, res.StatusCode)
				require.JSONEq(t, floorSoldOut, string(body))
				require.Equal(t, "*", res.Header.Get("Access-Control-Allow-Origin"))
				require.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
			}
		})
	}
}
