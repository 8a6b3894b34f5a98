-- Undoes 000011: the edges' counts at the open are dropped (the previous
-- release counted them in waiting_rooms.preopen_tickets as they came).
DROP TABLE waitroom_edge_tickets;
