DROP TABLE IF EXISTS console_queues;
