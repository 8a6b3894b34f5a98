DROP TABLE IF EXISTS admin_sessions_ended;
