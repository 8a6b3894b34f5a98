package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/postgres"
)

func TestSplitBudget(t *testing.T) {
	t.Parallel()
	t.Run("Default", func(t *testing.T) {
		b, err := splitBudget(defaultDBConns, 1, roleFlags{})
		require.NoError(t, err)
		require.Equal(t, budget{total: 14, listen: 1, session: 1, river: 3, jobs: 2, sale: 3, room: 2, admin: 2}, b)
		require.Equal(t, 14, b.used())
		require.LessOrEqual(t, 6*b.used()+4+5, 100-3, "six instances, a migration and a DBA fit a default server")
	})
	t.Run("LeastFirstThenNeeds", func(t *testing.T) {
		b, err := splitBudget(10, 1, roleFlags{})
		require.NoError(t, err)
		require.Equal(t, budget{total: 10, listen: 1, session: 1, river: 2, jobs: 1, sale: 2, room: 1, admin: 2}, b)
	})
	t.Run("MoreGoesToAdminAndRoom", func(t *testing.T) {
		b, err := splitBudget(19, 1, roleFlags{})
		require.NoError(t, err)
		require.Equal(t, budget{total: 19, listen: 1, session: 1, river: 3, jobs: 2, sale: 3, room: 4, admin: 5}, b)
	})
	t.Run("SaleFollowsBatchesInFlight", func(t *testing.T) {
		b, err := splitBudget(20, 4, roleFlags{})
		require.NoError(t, err)
		require.Equal(t, 9, b.sale)
		require.Equal(t, 20, b.used())
	})
	t.Run("GivenRolesOverride", func(t *testing.T) {
		b, err := splitBudget(14, 1, roleFlags{sale: 6, admin: 1})
		require.NoError(t, err)
		require.Equal(t, budget{total: 14, listen: 1, session: 1, river: 3, jobs: 1, sale: 6, room: 1, admin: 1}, b)
		require.Equal(t, 14, b.used())
	})
	t.Run("GivenRolesKeepTheRestUnused", func(t *testing.T) {
		b, err := splitBudget(30, 1, roleFlags{sale: 2, admin: 2, room: 2, river: 2, jobs: 1})
		require.NoError(t, err)
		require.Equal(t, 11, b.used())
	})
	t.Run("TooFew", func(t *testing.T) {
		_, err := splitBudget(8, 1, roleFlags{sale: 20})
		require.ErrorContains(t, err, "--db-conns 8 is too few: the roles need at least 27")
	})
}

func TestCheckServerWarnsWhenTheFleetCannotFit(t *testing.T) {
	t.Parallel()
	b, err := splitBudget(defaultDBConns, 1, roleFlags{})
	require.NoError(t, err)
	check := func(c postgres.Connections, pooler bool) string {
		var out bytes.Buffer
		checkServer(context.Background(), slog.New(slog.NewTextHandler(&out, nil)), c, b, pooler)
		return out.String()
	}
	// Five instances running, a sixth starting: 84 of 97.
	out := check(postgres.Connections{Max: 100, Reserved: 3, InUse: 75, Flashline: 70, Instances: 5}, false)
	require.Contains(t, out, "instances_seen=5 fleet_planned=84")
	require.NotContains(t, out, "WARN")
	// A seventh: 98 of 97.
	out = check(postgres.Connections{Max: 100, Reserved: 3, InUse: 89, Flashline: 84, Instances: 6}, false)
	require.Contains(t, out, "the fleet cannot fit")
	// The same seven behind a pooler: only their direct connections (5
	// each) reach the server from them.
	out = check(postgres.Connections{Max: 100, Reserved: 3, InUse: 50, Flashline: 50, Instances: 6}, true)
	require.NotContains(t, out, "WARN")
	// Another application holds nearly every slot.
	out = check(postgres.Connections{Max: 100, Reserved: 3, InUse: 90, Flashline: 0, Instances: 0}, false)
	require.Contains(t, out, "the fleet cannot fit")
}
