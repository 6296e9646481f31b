cd {{ table_driver_dir }} && {{ table_driver }} {{ table }}
