-- Admin sessions signed out (issue 44): a browser's admin session is a
-- cookie the server keeps nothing of while it lives (auth/session.go), so
-- signing out records its id here until the session would have expired, and
-- every request made with the cookie looks its id up (a primary-key probe;
-- admin requests are few). Rows past their expiry are deleted by the next
-- sign-out.
CREATE TABLE admin_sessions_ended (
    session_id text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
