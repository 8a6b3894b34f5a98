-- The edges' pre-open tickets (waitroom/watermark.go). An edge reports its
-- totals to the origins on every pull; they keep them in memory and write
-- nothing per arrival or per report. At the open each origin writes what it
-- last heard of each edge here, once (again only if a later report raised a
-- total before the freeze), the larger total winning per edge: origins behind
-- a load balancer each hear some of the reports, and whichever instance
-- freezes the crowd (a quarter second after the open) counts the edges'
-- tickets from here with the instances' own (preopen_tickets).
CREATE TABLE waitroom_edge_tickets (
    sale_id text   NOT NULL,
    edge    text   NOT NULL,
    tickets bigint NOT NULL,
    CONSTRAINT waitroom_edge_tickets_pkey PRIMARY KEY (sale_id, edge),
    CONSTRAINT waitroom_edge_tickets_room_fkey FOREIGN KEY (sale_id) REFERENCES waiting_rooms (sale_id) ON DELETE CASCADE,
    CONSTRAINT waitroom_edge_tickets_edge_valid CHECK (edge ~ '^[A-Za-z0-9_-]{1,64}$'),
    CONSTRAINT waitroom_edge_tickets_positive CHECK (tickets > 0)
);
