{{ table_driver }} {{ table }}
