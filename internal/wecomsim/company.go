package wecomsim

import (
	"fmt"

	"github.com/yidu-io/yidu/internal/fakewecom"
)

// UserID returns the UserID of synthetic member i (0-based), as Company
// names them.
func UserID(i int) string { return fmt.Sprintf("u%06d", i) }

var (
	surnames = []string{"王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周"}
	given    = []string{"伟", "芳", "娜", "敏", "静", "磊", "洋", "勇", "艳", "杰", "Alice", "Bob", "Chen Wei", "Emma", "Liam"}
)

// Company returns a synthetic corp for the fake WeCom API, with one app
// (agentID, secret) that sees the whole corp: departments 1..n
// in a tree (1 is the root, each next one under an earlier one) and users
// members UserID(0..users-1), each in one department, some in two, with
// Chinese and English names. Each department's leader
// (department_leader) is its first member, and the corp has three tags
// (标签) to compose against: 管理层 (the leaders, by UserID), 安全员 (two
// departments and a few members) and 新员工 (members only). It is
// deterministic.
func Company(corpID string, agentID int64, secret string, users, departments int) fakewecom.Corp {
	departments = max(departments, 1)
	c := fakewecom.Corp{CorpID: corpID, Apps: []fakewecom.App{{AgentID: agentID, Secret: secret}}}
	c.Departments = append(c.Departments, fakewecom.Department{ID: 1, Name: "总部", Order: 1})
	for id := 2; id <= departments; id++ {
		// Parent (id-2)/3+1 makes a tree of fan-out 3.
		c.Departments = append(c.Departments, fakewecom.Department{
			ID: id, ParentID: (id-2)/3 + 1, Name: fmt.Sprintf("部门%d Dept %d", id, id), Order: id,
		})
	}
	for i := range users {
		name := surnames[i%len(surnames)] + given[(i/len(surnames))%len(given)]
		depts := []int{i%departments + 1}
		if i%17 == 0 && departments > 1 {
			depts = append(depts, (i/17)%departments+1)
			if depts[1] == depts[0] {
				depts = depts[:1]
			}
		}
		c.Users = append(c.Users, fakewecom.User{UserID: UserID(i), Name: name, Departments: depts})
	}
	var leaders []string
	for i := range c.Departments {
		// Member id-1 is department id's first member (i%departments+1).
		if u := c.Departments[i].ID - 1; u < users {
			c.Departments[i].Leaders = []string{UserID(u)}
			leaders = append(leaders, UserID(u))
		}
	}
	safety := fakewecom.Tag{ID: 2, Name: "安全员", Departments: []int{min(2, departments), min(3, departments)}}
	newcomers := fakewecom.Tag{ID: 3, Name: "新员工"}
	for i := users - 1; i >= 0 && i >= users-10; i-- {
		newcomers.UserIDs = append(newcomers.UserIDs, UserID(i))
		if i%2 == 0 {
			safety.UserIDs = append(safety.UserIDs, UserID(i))
		}
	}
	c.Tags = []fakewecom.Tag{{ID: 1, Name: "管理层", UserIDs: leaders}, safety, newcomers}
	return c
}
