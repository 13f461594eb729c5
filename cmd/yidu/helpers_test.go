package main

import (
	"database/sql"

	"github.com/go-sql-driver/mysql"
)

func dbName(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	return c.DBName
}

func openAdmin(dsn string) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	c.DBName = ""
	return sql.Open("mysql", c.FormatDSN())
}
