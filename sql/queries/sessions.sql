-- The admin's browser sessions signed out (handlers/session.go).

-- name: EndAdminSession :exec
-- Records a signed-out session until it would have expired, and forgets
-- those whose expiry has passed (they are refused for it anyway).
WITH forgotten AS (
    DELETE FROM admin_sessions_ended WHERE expires_at < now()
)
INSERT INTO admin_sessions_ended (session_id, expires_at)
VALUES (@session_id, @expires_at)
ON CONFLICT (session_id) DO NOTHING;

-- name: AdminSessionEnded :one
-- Whether the session was signed out: a primary-key probe.
SELECT EXISTS (SELECT 1 FROM admin_sessions_ended WHERE session_id = @session_id)::boolean;
