package handlers_test

import (
	"bytes"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/internal/testkit/testidp"
)

// BenchmarkSoldOutRefusalByAlgorithm is what one "sold out" costs the
// service past net/http for a shopper who asks again and again with the
// same token, by the token's algorithm: HS256 (the JWT secret) and the
// identity provider's RS256, ES256 and EdDSA. The first request verifies
// the token (through the routes); every one after is the front door's,
// the token remembered, so that an RSA or ECDSA signature is paid once per
// token, not once per request. A refusal from memory waits for a read of
// the sale's stock version (at most one per 10 ms, shared), so the time
// per answer is that wait's: 64 shoppers ask at once, and what is reported
// besides is the process's CPU time per answer (cpu-µs/op), which is what
// an algorithm could change.
func BenchmarkSoldOutRefusalByAlgorithm(b *testing.B) {
	_, deps, sale := soldOutServer(b)
	idp := testidp.New(b)
	tokens := map[string]string{"HS256": customer(b, "retry-HS256")}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		k := testidp.NewKey(b, alg)
		idp.Add(string(alg), k)
		tokens[string(alg)] = bearer(testidp.Sign(b, k, string(alg), idp.Claims("retry-"+string(alg), nil)))
	}
	v, err := auth.New(b.Context(), adminToken, auth.Options{JWTSecret: jwtSecret, JWKSURL: idp.JWKSURL()})
	require.NoError(b, err)
	deps.Verifier = v
	door := handlers.Routes(deps)
	for _, alg := range []string{"HS256", "RS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			// The shopper's first request, which verifies the token.
			status, _, first := serve(b, door, http.MethodPost, "/sales/"+sale+"/reservations", tokens[alg], `{"quantity":1}`)
			require.Equal(b, http.StatusConflict, status, "%s", first)
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				body := []byte(`{"quantity":1}`)
				rd := bytes.NewReader(body)
				req, err := http.NewRequest(http.MethodPost, "/sales/"+sale+"/reservations", io.NopCloser(rd))
				require.NoError(b, err)
				req.ContentLength = int64(len(body))
				req.Header["Idempotency-Key"] = []string{"k1"}
				req.Header["Content-Type"] = []string{"application/json"}
				req.Header["Authorization"] = []string{tokens[alg]}
				rec := newRecorder()
				for pb.Next() {
					rd.Reset(body)
					rec.reset()
					door.ServeHTTP(rec, req)
					if rec.status != http.StatusConflict || !bytes.Contains(rec.body.Bytes(), []byte(`"sold_out"`)) {
						b.Errorf("%d %s", rec.status, rec.body.Bytes())
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
