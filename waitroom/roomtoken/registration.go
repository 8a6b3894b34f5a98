package roomtoken

import "crypto/sha256"

// RegistrationNonce is the nonce of the proof of work asked to register in
// a lottery: derived, like a ticket's (ChallengeNonce), from the signing key,
// here with the sale and the customer, so nothing is stored and every
// instance derives the same one.
func (k *Keyring) RegistrationNonce(saleID, customerID string) string {
	return k.keys[0].nonce(registrationChallengeID(saleID, customerID))
}

// VerifyRegistrationChallenge reports whether solution solves the
// registration challenge of (saleID, customerID) at the given difficulty, as
// VerifyChallenge does for a ticket (any key of the ring; bits <= 0: no
// challenge).
func (k *Keyring) VerifyRegistrationChallenge(saleID, customerID, solution string, bits int) bool {
	if bits <= 0 {
		return true
	}
	if bits > 8*sha256.Size || !validSolution(solution) {
		return false
	}
	id := registrationChallengeID(saleID, customerID)
	for _, key := range k.keys {
		if solves(key.nonce(id), solution, bits) {
			return true
		}
	}
	return false
}

// registrationChallengeID is what a registration's nonce is derived from;
// the "lottery" prefix and the NUL separator keep it apart from any ticket's
// admission id (22 base64url characters).
func registrationChallengeID(saleID, customerID string) string {
	return "lottery\x00" + saleID + "\x00" + customerID
}
