package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline/internal/dbsqlc"
)

// EndAdminSession records that the admin session id was signed out; it is
// refused from now on until expires, when it would have expired anyway.
func (s *Store) EndAdminSession(ctx context.Context, id string, expires time.Time) error {
	err := dbsqlc.New(s.admin).EndAdminSession(ctx, dbsqlc.EndAdminSessionParams{SessionID: id, ExpiresAt: expires})
	if err != nil {
		return fmt.Errorf("end an admin session: %w", translate(err))
	}
	return nil
}

// AdminSessionEnded reports whether the admin session id was signed out.
func (s *Store) AdminSessionEnded(ctx context.Context, id string) (bool, error) {
	ended, err := dbsqlc.New(s.admin).AdminSessionEnded(ctx, dbsqlc.AdminSessionEndedParams{SessionID: id})
	if err != nil {
		return false, fmt.Errorf("read whether an admin session ended: %w", translate(err))
	}
	return ended, nil
}
