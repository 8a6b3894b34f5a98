package roomtoken_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/roomtoken"
)

func TestRegistrationChallenge(t *testing.T) {
	k := roomtoken.DeriveKeyring("registration-challenge-test-secret")
	nonce := k.RegistrationNonce("sale_1", "cust_1")
	require.NotEqual(t, nonce, k.RegistrationNonce("sale_1", "cust_2"))
	require.NotEqual(t, nonce, k.RegistrationNonce("sale_2", "cust_1"))
	solution := roomtoken.Solve(nonce, 8)
	require.True(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", solution, 8))
	require.True(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", "", 0), "no challenge")
	require.False(t, k.VerifyRegistrationChallenge("sale_1", "cust_2", roomtoken.Solve(nonce, 16), 16))
	require.False(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", "-1", 8))
}
