DROP TABLE IF EXISTS console_instances;
