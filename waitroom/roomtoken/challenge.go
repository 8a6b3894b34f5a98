package roomtoken

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"io"
	"math/bits"
	"strconv"
)

// The challenge is a proof of work asked of a waiter before admission: find a
// decimal string solution such that SHA-256 over the UTF-8 bytes of
// nonce + ":" + solution has at least bits leading zero bits. A browser finds
// one in about 2^bits hashes; the server checks it with one. The nonce is
// derived from the ticket, so nothing is stored and every instance computes
// the same nonce for the same ticket.

// maxSolutionLen is the longest solution accepted: 20 digits hold any uint64.
const maxSolutionLen = 20

// ChallengeNonce is the challenge nonce for a ticket: base64url of
// HMAC-SHA256(signing key, "pow\x00" + AdmissionID(t)) truncated to 16 bytes
// (22 characters). Nobody without the key can compute it ahead of the ticket.
func (k *Keyring) ChallengeNonce(t Ticket) string {
	return k.keys[0].nonce(AdmissionID(t))
}

func (key key) nonce(admissionID string) string {
	m := hmac.New(sha256.New, key.secret)
	io.WriteString(m, "pow\x00")
	io.WriteString(m, admissionID)
	var sum [sha256.Size]byte
	return b64.EncodeToString(m.Sum(sum[:0])[:16])
}

// VerifyChallenge reports whether solution solves the ticket's challenge at
// the given difficulty: solution is a decimal string (1-20 digits, no sign, no
// leading zero unless it is "0") and SHA-256(nonce + ":" + solution) has at
// least bits leading zero bits. A nonce made with any key of the ring is
// accepted, so a challenge handed out before a rotation stays solvable; that
// costs one HMAC and one SHA-256 per key. bits <= 0 means no challenge: always
// true.
func (k *Keyring) VerifyChallenge(t Ticket, solution string, bits int) bool {
	if bits <= 0 {
		return true
	}
	if bits > 8*sha256.Size || !validSolution(solution) {
		return false
	}
	id := AdmissionID(t)
	for _, key := range k.keys {
		if solves(key.nonce(id), solution, bits) {
			return true
		}
	}
	return false
}

func validSolution(s string) bool {
	if len(s) == 0 || len(s) > maxSolutionLen || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func solves(nonce, solution string, bits int) bool {
	var buf [64]byte
	b := append(append(append(buf[:0], nonce...), ':'), solution...)
	return LeadingZeroBits(sha256.Sum256(b)) >= bits
}

// LeadingZeroBits counts the zero bits at the start of sum, most significant
// bit of the first byte first (256 for all zeros).
func LeadingZeroBits(sum [32]byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds the smallest solution to the challenge (nonce, bits) by brute
// force from 0 upwards, as a browser would: about 2^bits hashes. It is for
// tests and the load generator. bits <= 0 gives "0"; bits above 256 cannot
// be met and panic.
func Solve(nonce string, bits int) string {
	s, _ := SolveContext(context.Background(), nonce, bits, nil)
	return s
}

// SolveContext is Solve that stops when ctx is done (returning its error)
// and calls progress, when not nil, every 2^20 hashes with how many it has
// tried.
func SolveContext(ctx context.Context, nonce string, bits int, progress func(tried uint64)) (string, error) {
	if bits <= 0 {
		return "0", nil
	}
	if bits > 8*sha256.Size {
		panic("waitroom: Solve: no hash has more than 256 leading zero bits")
	}
	prefix := append([]byte(nonce), ':')
	buf := make([]byte, 0, len(prefix)+maxSolutionLen)
	for n := uint64(0); ; n++ {
		if n&(1<<20-1) == 0 && n > 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			if progress != nil {
				progress(n)
			}
		}
		b := strconv.AppendUint(append(buf[:0], prefix...), n, 10)
		if LeadingZeroBits(sha256.Sum256(b)) >= bits {
			return string(b[len(prefix):]), nil
		}
	}
}
